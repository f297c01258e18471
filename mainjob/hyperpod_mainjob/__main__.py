from hyperpod_mainjob.job import fast_exit, main

fast_exit(main)
