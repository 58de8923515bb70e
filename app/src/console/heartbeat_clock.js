// The console's heartbeat clock, run as a dedicated worker.
// Browsers throttle a hidden page's own timers (Chrome: to once a minute
// after five minutes hidden), so a console waiting for calls in a
// background tab would fall silent, be closed by the server after the
// presence TTL and lapse to offline. A dedicated worker's timers are not
// throttled that way, and the message it posts wakes the page at once.
// The page posts the interval in milliseconds; the worker answers a tick
// each time it passes.
let every;
onmessage = (e) => {
  clearInterval(every);
  every = setInterval(() => postMessage(0), e.data);
};
