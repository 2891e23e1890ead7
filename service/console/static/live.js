// Keeps the "needs a person" list live: the server sends its rows (drawn and escaped
// as the page draws them) whenever they change. When the stream fails, the page says
// the list is stale.
(function () {
  var rows = document.getElementById("needs-rows");
  var note = document.getElementById("live");
  if (!rows || !note || !window.EventSource) { return; }
  note.hidden = false;
  var say = function (text, stale) {
    note.textContent = text;
    note.className = stale ? "live flash bad" : "live";
  };
  var es = new EventSource("/live");
  es.addEventListener("needs", function (e) {
    var t = document.createElement("template");
    t.innerHTML = e.data;
    rows.replaceChildren(t.content);
    say("Live: this list updates itself (last change " + new Date().toLocaleTimeString() + ").", false);
  });
  es.addEventListener("failed", function (e) {
    say("Not live: " + e.data + ". What shows may be stale.", true);
  });
  es.addEventListener("ended", function (e) {
    es.close();
    say("Not live: " + e.data + ". What shows may be stale.", true);
  });
  es.onerror = function () {
    say("Not live: the console cannot be reached; it tries again. What shows may be stale.", true);
  };
  es.onopen = function () { say("Live: this list updates itself.", false); };
})();
