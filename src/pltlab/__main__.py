from pltlab.cli import main

main()
