from nsysan.cli import main

main()
