from pt2doctor.cli import main

main()
