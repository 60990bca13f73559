/// The bench page: self-contained (its own script and style, no outside asset, no framework), readable at arm's
/// length and on a phone. The script shows outside text only through `textContent`, never as markup, and the
/// page's Content-Security-Policy runs no other script, so a barcode that says `<script>` shows as those
/// characters.
///
/// How it stays whole: it loads the newest scans (`/scans?newest=`), then follows `/events?after=<last>&status=1`.
/// The browser's `EventSource` reconnects by itself (after `retry:`, 1 s) with `Last-Event-ID`, so a restart of
/// the bridge or a dropped connection leaves no gap; rows are keyed by scan id, so none shows twice.
enum BenchPage {
    /// The page; `signOut` (a listener with a token) adds the sign-out button.
    static func html(signOut: Bool) -> String {
        signOut
            ? page.replacingOccurrences(
                of: "<span id=\"link\"",
                with: "<form method=\"post\" action=\"/logout\" id=\"sign-out\">"
                    + "<button type=\"submit\">Sign out</button></form>\n  <span id=\"link\"")
            : page
    }

    static let page = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>plings-bridge</title>
        <link rel="stylesheet" href="/app.css">
        <script src="/app.js" defer></script>
        </head>
        <body>
        <header>
          <h1>plings-bridge</h1>
          <span id="link" class="link down">connecting</span>
        </header>
        <section id="service" aria-label="service">
          <div class="panel"><h2>Sources</h2><ul id="sources"></ul></div>
          <div class="panel"><h2>Position</h2><p id="fix">-</p></div>
          <div class="panel"><h2>Delivery</h2><ul id="sinks"></ul></div>
          <div class="panel" id="error-panel" hidden><h2>Last error</h2><p id="last-error"></p></div>
        </section>
        <main id="devices" aria-live="polite"><p id="empty">No scans yet. Scan a code or tap a tag.</p></main>
        </body>
        </html>

        """

    static let style = """
        :root { color-scheme: light dark; --ok: #1a7f37; --bad: #c62828; --muted: #6e7781; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 18px/1.4 system-ui, sans-serif; }
        header { display: flex; align-items: center; justify-content: space-between; padding: .5rem 1rem;
                 border-bottom: 1px solid var(--muted); }
        h1 { font-size: 1.3rem; margin: 0; }
        h2 { font-size: .9rem; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); margin: 0 0 .3rem; }
        .link { font-weight: 600; padding: .15rem .6rem; border-radius: 1rem; color: #fff; }
        .link.up { background: var(--ok); }
        .link.down { background: var(--bad); }
        #service { display: grid; grid-template-columns: repeat(auto-fit, minmax(14rem, 1fr)); gap: .5rem;
                   padding: .5rem 1rem; }
        .panel ul { list-style: none; margin: 0; padding: 0; }
        .panel li, .panel p { margin: 0; overflow-wrap: anywhere; }
        .on::before { content: "\\25CF  "; color: var(--ok); }
        .off::before { content: "\\25CB  "; color: var(--bad); }
        #devices { display: grid; grid-template-columns: repeat(auto-fit, minmax(20rem, 1fr)); gap: 1rem; padding: 1rem; }
        .device { border: 1px solid var(--muted); border-radius: .4rem; padding: .5rem .75rem; }
        .device h3 { margin: 0 0 .4rem; font-size: 1rem; overflow-wrap: anywhere; }
        .scan { display: grid; grid-template-columns: 1fr auto; gap: 0 .5rem; padding: .35rem 0;
                border-top: 1px solid color-mix(in srgb, var(--muted) 30%, transparent); }
        .scan .what { font-size: 1.6rem; font-weight: 700; overflow-wrap: anywhere; }
        .scan .when { color: var(--muted); font-variant-numeric: tabular-nums; }
        .scan .detail { grid-column: 1 / -1; color: var(--muted); font-size: .9rem; overflow-wrap: anywhere; }
        .scan.unrecognized .what { color: var(--bad); font-size: 1.2rem; font-family: ui-monospace, monospace; }
        .scan.unrecognized { background: color-mix(in srgb, var(--bad) 12%, transparent); }
        .scan.fresh { animation: flash 1.5s ease-out; }
        @keyframes flash { from { background: color-mix(in srgb, var(--ok) 35%, transparent); } }
        @media (max-width: 30rem) { body { font-size: 16px; } .scan .what { font-size: 1.3rem; } }

        """

    static let script = """
        "use strict";
        // Rows per device kept on the page.
        const PER_DEVICE = 25;
        const seen = new Set();
        let last = 0;
        let source = null;

        function el(tag, className, text) {
          const node = document.createElement(tag);
          if (className) node.className = className;
          if (text !== undefined) node.textContent = String(text);
          return node;
        }

        function deviceBox(scan) {
          const key = scan.source.kind + "\\u0000" + scan.source.device;
          for (const box of document.querySelectorAll(".device")) {
            if (box.dataset.key === key) return box;
          }
          const box = el("section", "device");
          box.dataset.key = key;
          box.append(el("h3", "", scan.source.device + " (" + scan.source.kind + ")"));
          box.append(el("div", "rows"));
          return box;
        }

        function row(scan, fresh) {
          const recognized = scan.input !== null && typeof scan.input === "object";
          const node = el("div", "scan " + (recognized ? "recognized" : "unrecognized") + (fresh ? " fresh" : ""));
          node.dataset.id = scan.id;
          const time = new Date(scan.createdAt);
          node.append(el("div", "what", recognized ? scan.input.identifier : (scan.raw === "" ? "(empty read)" : scan.raw)));
          node.append(el("div", "when", isNaN(time) ? scan.createdAt : time.toLocaleTimeString()));
          const detail = recognized
            ? ["path " + scan.input.path, scan.input.classPointer && "class " + scan.input.classPointer,
               scan.source.uid && "tag " + scan.source.uid].filter(Boolean).join(" \\u00b7 ")
            : "not a Plings code: " + (scan.lastError || "unrecognized");
          node.append(el("div", "detail", detail));
          return node;
        }

        function show(scan, fresh) {
          if (seen.has(scan.id)) return;
          seen.add(scan.id);
          document.getElementById("empty")?.remove();
          const box = deviceBox(scan);
          const rows = box.querySelector(".rows");
          rows.prepend(row(scan, fresh));
          while (rows.children.length > PER_DEVICE) rows.lastElementChild.remove();
          // The device with the newest scan comes first.
          document.getElementById("devices").prepend(box);
        }

        function item(text, on) {
          return el("li", on === undefined ? "" : (on ? "on" : "off"), text);
        }

        function showStatus(status) {
          const sources = document.getElementById("sources");
          sources.replaceChildren(...(status.sources || []).map(s => item(s.kind + ": " + s.state, s.up)));
          if (!sources.children.length) sources.append(item("none running"));
          const location = status.location || {};
          const fix = location.fix;
          document.getElementById("fix").textContent = fix
            ? fix.latitude.toFixed(5) + ", " + fix.longitude.toFixed(5) + " (" + fix.from + ")"
            : "no fix (" + (location.source || "none") + ")";
          const sinks = document.getElementById("sinks");
          const counts = (status.spool || {}).counts || {};
          const lines = [];
          // A line per configured sink, with what it still owes; none configured: the spool is the destination.
          const sink = (name, entry, up) => item(name + ": " + entry.state + ", " + (entry.pending || 0) + " waiting" + (entry.reason ? " (" + entry.reason + ")" : ""), up);
          if (status.api) lines.push(sink("API", status.api, status.api.state === "delivering"));
          if (status.mqtt) lines.push(sink("MQTT", status.mqtt, status.mqtt.state === "publishing"));
          if (status.webhook) lines.push(sink("Webhook", status.webhook, status.webhook.state === "delivering"));
          if (!lines.length) lines.push(item("No sink configured: reads are kept in the spool (" + (counts.kept || 0) + " kept)"));
          const damaged = (status.spool || {}).damaged || [];
          if (damaged.length) lines.push(item("Spool: " + damaged.length + " damaged file(s) moved aside; reads go on in a fresh spool. Replace the storage card soon.", false));
          sinks.replaceChildren(...lines);
          const panel = document.getElementById("error-panel");
          panel.hidden = !status.lastError;
          document.getElementById("last-error").textContent = status.lastError || "";
        }

        function link(up) {
          const node = document.getElementById("link");
          node.className = "link " + (up ? "up" : "down");
          node.textContent = up ? "live" : "reconnecting";
        }

        function follow() {
          source = new EventSource("/events?status=1&after=" + last);
          source.onopen = () => link(true);
          source.onmessage = (event) => {
            last = Math.max(last, Number(event.lastEventId) || 0);
            show(JSON.parse(event.data), true);
          };
          source.addEventListener("status", (event) => showStatus(JSON.parse(event.data)));
          source.onerror = () => {
            link(false);
            // The browser retries by itself while the stream is CONNECTING; a refused one is CLOSED: start again
            // from the last scan shown, or, when the session is gone (the service restarted: sessions live in its
            // memory; it expired; the token changed), show the sign-in form again instead of retrying forever.
            if (source.readyState === EventSource.CLOSED) {
              fetch("/status", { cache: "no-store" }).then(
                (answer) => answer.status === 401 ? location.reload() : setTimeout(follow, 2000),
                () => setTimeout(follow, 2000));
            }
          };
        }

        async function start() {
          try {
            const reply = await fetch("/scans?newest=100", { cache: "no-store" });
            if (reply.status === 401) {
              location.reload();
              return;
            }
            const answer = await reply.json();
            for (const scan of answer.scans) show(scan, false);
            last = answer.last;
          } catch (error) {
            setTimeout(start, 2000);
            return;
          }
          follow();
        }

        start();

        """

    /// The login form of a listener with a token (`http.tokenFile`).
    static func login(failed: Bool) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>plings-bridge: sign in</title>
        <link rel="stylesheet" href="/app.css">
        </head>
        <body>
        <header><h1>plings-bridge</h1></header>
        <main id="devices">
        <form method="post" action="/login" class="device">
        <h3>Token</h3>
        \(failed ? "<p class=\"scan unrecognized\">That is not the token.</p>" : "")
        <p><input type="password" name="token" autocomplete="current-password" required autofocus></p>
        <p><button type="submit">Sign in</button></p>
        <p class="detail">The token is in the file http.tokenFile names (docs/operations.md).</p>
        </form>
        </main>
        </body>
        </html>

        """
    }
}
