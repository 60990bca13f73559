import CSysShim
import Glibc

/// A named POSIX thread that can be joined: the one way the bridge runs blocking work off Swift's cooperative
/// pool. `join()` waits for the body to return, so no thread outlives the part that started it unseen (Foundation's
/// `Thread` cannot be joined).
public final class OwnThread: Sendable {
    private let handle: Mutex<pthread_t?>

    /// Starts `body` on a new thread called `name` (the kernel keeps 15 bytes of it, as `top -H` shows).
    public init(name: String, _ body: @escaping @Sendable () -> Void) {
        final class Start {
            let name: String
            let body: @Sendable () -> Void
            init(name: String, body: @escaping @Sendable () -> Void) {
                self.name = name
                self.body = body
            }
        }
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let created = pthread_create(
            &thread, nil,
            { context in
                guard let context else { return nil }
                let start = Unmanaged<Start>.fromOpaque(context).takeRetainedValue()
                plings_name_this_thread(start.name)
                start.body()
                return nil
            }, start)
        if created != 0 {
            // No thread (out of resources): run the body here rather than lose it.
            Unmanaged<Start>.fromOpaque(start).takeRetainedValue().body()
            handle = Mutex(nil)
        } else {
            handle = Mutex(thread)
        }
    }

    /// Waits until the body has returned. Called at most once per thread that matters; later calls return at once.
    public func join() {
        if let thread = take() { pthread_join(thread, nil) }
    }

    /// Lets the thread end on its own, never joined (a part's stop gave up waiting for it at its deadline): its
    /// resources go when it ends. Later `join()` calls return at once.
    public func detach() {
        if let thread = take() { pthread_detach(thread) }
    }

    /// The handle, once: whoever takes it joins or detaches the thread, and later calls find nothing.
    private func take() -> pthread_t? {
        handle.withLock { held in
            defer { held = nil }
            return held
        }
    }

    /// Runs each body on its own thread at once and returns when all have returned (independent parts that stop
    /// together against one deadline).
    public static func together(name: String, _ bodies: [@Sendable () -> Void]) {
        if bodies.count == 1 {
            bodies[0]()
            return
        }
        let threads = bodies.map { OwnThread(name: name, $0) }
        for thread in threads { thread.join() }
    }
}
