// Live refresh: a page whose <main> has data-refresh="N" fetches itself
// every N seconds and swaps in the new <main>, so counts stay current
// without reloading (and without losing scroll or focus elsewhere).
// Refreshing pauses while the tab is hidden or a form has focus.
(function () {
  "use strict";
  var main = document.getElementById("live");
  var seconds = main && parseInt(main.dataset.refresh, 10);
  if (!seconds) return;
  var busy = false;
  function refresh() {
    if (busy || document.hidden) return;
    var active = document.activeElement;
    if (active && active.form && main.contains(active)) return;
    busy = true;
    fetch(location.href, { credentials: "same-origin", headers: { "X-Bq-Refresh": "1" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var next = new DOMParser().parseFromString(html, "text/html").getElementById("live");
        if (next) {
          main.innerHTML = next.innerHTML;
          main.dataset.refreshed = String(Date.now());
        }
      })
      .catch(function () { main.classList.add("stale"); })
      .then(function () { busy = false; });
  }
  setInterval(refresh, seconds * 1000);
})();
