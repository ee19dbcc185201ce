// The live tail of the inspector's "Now" page. It builds every node with
// textContent (never innerHTML) from the server's content-dark event lines,
// and resumes after a disconnect by the last event id (EventSource sends
// Last-Event-ID by itself).
"use strict";
(function () {
  const table = document.getElementById("tail");
  const status = document.getElementById("live-status");
  if (!table) {
    return;
  }
  const body = table.tBodies[0];
  const after = table.dataset.after || "0";
  const source = new EventSource("/events/stream?after=" + encodeURIComponent(after));
  const setStatus = function (text) {
    if (status) {
      status.textContent = text;
    }
  };
  source.addEventListener("open", function () {
    setStatus("(live)");
  });
  source.addEventListener("message", function (message) {
    const e = JSON.parse(message.data);
    const row = document.createElement("tr");
    row.className = "new";
    for (const text of [String(e.position), e.time, e.type, e.source, e.summary]) {
      const cell = document.createElement("td");
      cell.textContent = text;
      row.appendChild(cell);
    }
    body.insertBefore(row, body.firstChild);
    setStatus("(live, last event " + e.position + ")");
  });
  source.addEventListener("error", function () {
    setStatus("(reconnecting)");
  });
})();
