import Glibc

/// The `plings-bridge` executable: parse arguments, run the command, exit with its code.
let code = await CLI().main(CommandLine.arguments)
exit(code)
