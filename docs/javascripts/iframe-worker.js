/*
 * Web workers for the site opened from disk (file://), shipped with the site.
 *
 * Browsers refuse `new Worker(url)` on a page opened from a file (a SecurityError: the page's
 * origin is null), and the theme runs its search in a worker. Material's offline plugin
 * loads a stand-in from unpkg.com, which a machine without internet cannot reach; this file
 * is ours and comes with the site (mkdocs.yml names it under `extra.polyfills`, so the
 * plugin adds no script from the internet).
 *
 * On file:// only, `window.Worker` becomes `FileWorker`: the worker's script runs in a hidden
 * iframe of the page's own origin, and messages go both ways as `message` events, delivered
 * asynchronously as a real worker's are. The script sees `postMessage` (to the page),
 * `importScripts` (loads scripts in order; returns a promise, which the theme's search
 * worker awaits) and `addEventListener("message", ...)` as in a worker. Served over http(s)
 * the page keeps the browser's own workers.
 */
(function () {
  "use strict";

  class FileWorker extends EventTarget {
    constructor(url) {
      super();
      this.url = String(url);
      this.onmessage = null;
      this.onerror = null;
      this.frame = document.createElement("iframe");
      this.frame.hidden = true;
      document.body.appendChild(this.frame);
      const inner = this.frame.contentWindow;
      inner.postMessage = (data) => setTimeout(() => this.emit("message", { data }), 0);
      inner.importScripts = (...urls) => urls.reduce(
        (done, src) => done.then(() => load(inner.document, src)), Promise.resolve());
      inner.addEventListener("error", (event) => this.emit("error", {
        message: event.message, filename: event.filename, lineno: event.lineno,
        colno: event.colno, error: event.error,
      }));
      this.ready = load(inner.document, this.url);
    }

    /* Send `data` to the worker's script, once it has run. */
    postMessage(data) {
      this.ready.then(() => {
        const inner = this.frame.contentWindow;
        if (inner) inner.dispatchEvent(new inner.MessageEvent("message", { data }));
      });
    }

    /* Stop the worker: its frame goes, and with it every listener it set. */
    terminate() {
      this.frame.remove();
    }

    /* A `message` or `error` event to the page's listeners and handler. */
    emit(type, init) {
      const event = type === "message" ? new MessageEvent(type, init) : new ErrorEvent(type, init);
      this.dispatchEvent(event);
      const handler = type === "message" ? this.onmessage : this.onerror;
      if (typeof handler === "function") handler.call(this, event);
    }
  }

  /* A promise of the script at `src` run in `doc` (rejected if it does not load). */
  function load(doc, src) {
    return new Promise((resolve, reject) => {
      const script = doc.createElement("script");
      script.src = src;
      script.onload = resolve;
      script.onerror = () => reject(new Error("could not load " + src));
      doc.body.appendChild(script);
    });
  }

  // The theme's search worker looks for this name to find its language scripts from a frame.
  window.IFrameWorker = FileWorker;
  if (location.protocol === "file:") window.Worker = FileWorker;
})();
