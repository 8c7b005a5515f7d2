from transcoder.cli import main

main()
