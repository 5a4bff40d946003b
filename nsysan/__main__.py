from nsysan._launcher import main

main()
