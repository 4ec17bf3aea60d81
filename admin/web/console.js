// Refreshes the page's content by fetching its server-rendered fragment,
// without reloading the page. Read-only: only GET requests.
(function () {
  "use strict";
  var main = document.getElementById("content");
  if (!main) { return; }
  var url = main.getAttribute("data-fragment");
  var every = 3000;
  function refresh() {
    fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        var y = window.scrollY;
        main.innerHTML = html;
        window.scrollTo(0, y);
        main.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* keep the last content; try again */ })
      .then(function () { setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
})();
