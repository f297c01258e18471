from hyperpod_dpd.entry import main

main()
