from hyperpod_dpd.app import main

main()
