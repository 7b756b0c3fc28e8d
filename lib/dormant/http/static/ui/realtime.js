// Dormant's realtime client for browsers (docs/realtime.md): an actor's events pushed over a WebSocket, in seq
// order, each once, across reconnects. Shipped in the wheel and served by the API at /ui/assets/realtime.js.
//
//   import { subscribe } from "/ui/assets/realtime.js";
//   const sub = subscribe({ url: "ws://127.0.0.1:8787/realtime", actor: "progress", key: ["job-1"], after: 0,
//                           onEvent: (event) => console.log(event.seq, event.name, event.payload) });
//   ... sub.cursor (the last seq delivered); sub.close()
//   const total = await sub.call("add", 2);   // an action over the same socket (the HTTP action route's path)
//
// An event pushed without its payload (`fetch: true`, too big for a frame) is passed to `fetchEvent(seq)` when
// given (read it over HTTP: GET .../events?after=seq-1&limit=1), else delivered as it came.
// `call(name, ...args)` returns a Promise of the action's result; it rejects with an Error whose `code` and
// `status` are the HTTP action route's for the same failure (docs/realtime.md), or `connection_lost` when the
// socket drops before the answer (the action may have run: it is not sent again).

const FIRST_DELAY_MS = 100;

function actionError({ code = "internal", message = "", status = null, detail = null }) {
  const error = new Error(`${code}: ${message}`);
  Object.assign(error, { code, status, detail });
  return error;
}
const MAX_DELAY_MS = 5000;

export function subscribe({ url, actor, key, after = 0, onEvent, onError = () => {}, onOpen = () => {},
                            fetchEvent = null }) {
  const state = { cursor: after, closed: false, socket: null, held: new Map(), replayed: false, delay: FIRST_DELAY_MS,
                  answers: new Map(), nextId: 1 };
  let chain = Promise.resolve(); // events are delivered one after the other, also when one needs a fetch

  function deliver(frame) {
    chain = chain.then(async () => {
      let event = frame;
      if (frame.fetch && fetchEvent) event = await fetchEvent(frame.seq);
      onEvent(event);
    }).catch(onError);
  }

  function send(socket) {
    state.held.clear();
    state.replayed = false;
    socket.send(JSON.stringify({ type: "subscribe", actor, key, after: state.cursor }));
  }

  // The ordering rule of dormant.core.realtime.Sequencer: deliver seq cursor+1, hold later ones, drop earlier ones.
  function take(frame) {
    if (frame.type === "subscribed") {
      state.replayed = true;
      const through = frame.cursor;
      for (const seq of [...state.held.keys()].filter((s) => s <= through).sort((a, b) => a - b)) {
        deliver(state.held.get(seq));
        state.held.delete(seq);
        state.cursor = Math.max(state.cursor, seq);
      }
      state.cursor = Math.max(state.cursor, through);
    } else if (frame.type === "event" && frame.seq > state.cursor) {
      state.held.set(frame.seq, frame);
    }
    while (state.held.has(state.cursor + 1)) {
      state.cursor += 1;
      deliver(state.held.get(state.cursor));
      state.held.delete(state.cursor);
    }
  }

  function open() {
    if (state.closed) return;
    const socket = new WebSocket(url);
    state.socket = socket;
    socket.onopen = () => {
      state.delay = FIRST_DELAY_MS;
      send(socket);
    };
    socket.onmessage = (message) => {
      const frame = JSON.parse(message.data);
      if (frame.type === "action_result") {
        const waiting = state.answers.get(frame.id);
        if (waiting) {
          state.answers.delete(frame.id);
          if (frame.ok) waiting.resolve(frame.result);
          else waiting.reject(actionError(frame.error || {}));
        }
        return;
      }
      if (frame.type === "error") {
        onError(new Error(`${frame.code}: ${frame.message}`));
        return;
      }
      take(frame);
      if (frame.type === "subscribed") onOpen();
      if (state.replayed && state.held.size > 0) send(socket); // a seq never came: replay from the cursor
    };
    socket.onclose = () => {
      for (const waiting of state.answers.values()) {
        waiting.reject(actionError({ code: "connection_lost",
                                     message: "the socket dropped before the answer: it may have run" }));
      }
      state.answers.clear();
      if (state.closed) return;
      setTimeout(open, state.delay); // reconnect, and subscribe again from the cursor
      state.delay = Math.min(state.delay * 2, MAX_DELAY_MS);
    };
  }

  function call(name, ...args) {
    const socket = state.socket;
    if (!socket || socket.readyState !== WebSocket.OPEN) {
      return Promise.reject(actionError({ code: "not_connected", message: "the socket is not open" }));
    }
    const id = `c${state.nextId++}`;
    return new Promise((resolve, reject) => {
      state.answers.set(id, { resolve, reject });
      socket.send(JSON.stringify({ type: "action", id, actor, key, name, args }));
    });
  }

  open();
  return {
    call,
    get cursor() { return state.cursor; },
    close() {
      state.closed = true;
      if (state.socket) state.socket.close();
    },
  };
}
