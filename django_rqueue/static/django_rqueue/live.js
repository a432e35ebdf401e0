/* django-rqueue admin: refresh a page's counts, status and progress without a reload.
 *
 * Loaded with <script src> (no inline script: compatible with a content security policy
 * without 'unsafe-inline'). The page's element #rq-live names the JSON to poll (data-url)
 * and how often (data-interval, ms). Each reply is
 *   {"text": {id: text}, "bars": {id: {"value": number|null, "max": number}}, "final": bool}
 * Polling pauses while the page is hidden and stops once "final" is true or a poll fails.
 * Without JavaScript the page is complete as rendered: this only keeps it current.
 */
(function () {
  "use strict";

  function start() {
    var root = document.getElementById("rq-live");
    if (!root || !window.fetch) {
      return;
    }
    var url = root.getAttribute("data-url");
    var interval = parseInt(root.getAttribute("data-interval"), 10) || 2000;
    var timer = null;
    var busy = false;
    var stopped = false;

    function apply(reply) {
      var text = reply.text || {};
      Object.keys(text).forEach(function (id) {
        var element = document.getElementById(id);
        if (element && element.textContent !== text[id]) {
          element.textContent = text[id];
        }
      });
      var bars = reply.bars || {};
      Object.keys(bars).forEach(function (id) {
        var element = document.getElementById(id);
        if (!element) {
          return;
        }
        element.max = bars[id].max;
        if (bars[id].value === null) {
          element.removeAttribute("value");
        } else {
          element.value = bars[id].value;
        }
      });
      if (reply.final) {
        stopped = true;
      }
    }

    function schedule() {
      if (!stopped && timer === null && !document.hidden) {
        timer = window.setTimeout(poll, interval);
      }
    }

    function poll() {
      timer = null;
      if (stopped || busy || document.hidden) {
        return;
      }
      busy = true;
      window
        .fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
        .then(function (response) {
          if (!response.ok) {
            throw new Error("rqueue live refresh: HTTP " + response.status);
          }
          return response.json();
        })
        .then(apply)
        .catch(function () {
          stopped = true;
        })
        .then(function () {
          busy = false;
          schedule();
        });
    }

    document.addEventListener("visibilitychange", function () {
      if (document.hidden) {
        if (timer !== null) {
          window.clearTimeout(timer);
          timer = null;
        }
      } else {
        schedule();
      }
    });
    schedule();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
