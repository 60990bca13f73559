import Glibc

/// The `plings-bridge` executable: parse arguments, run the command, exit with its code.
///
/// Synchronous on purpose: no command uses Swift concurrency. Once a process has used libdispatch's global queues
/// (which an async `main` does), libdispatch's pool monitor wakes it every second for as long as it lives; a
/// service on the main thread, blocked in `read` on its signal pipe, stays asleep (issue 27: an idle box sleeps).
/// Every blocking wait runs on the main thread or on a thread of its own.
let code = CLI().main(CommandLine.arguments)
exit(code)
