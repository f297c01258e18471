from hyperpod_core.teardown import fast_exit
from hyperpod_mainjob.job import main

# Everything is on disk when main returns (outputs moved into place, children waited for): the exit handlers run
# (jsii's removes its runtime folder from the temp folder), the interpreter's teardown does not.
fast_exit(main)
