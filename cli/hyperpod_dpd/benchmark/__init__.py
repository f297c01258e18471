"""Colocated-vs-DPD benchmark: run the genai-bench Jobs (``bench``), read their results and decide (``report``)."""
