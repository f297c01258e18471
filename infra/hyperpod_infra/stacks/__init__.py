"""Thin stacks: each instantiates constructs, wires them, adds outputs and acknowledgements."""
