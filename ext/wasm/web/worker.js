// worker.js -- the page's database, off the main thread: make PLATFORM=wasm web wraps
// attnext-web.js and this file in one function, attnextWorkerMain(scope), which the page runs
// as a Web Worker (scope = the worker's self) or, where a worker cannot start, on its own thread
// (scope = a stand-in with the same two members).
//
//   page -> worker: {id: 3, sql: "SELECT attn_predict('news', ?1)", params: ["Okafor scores"]}
//   worker -> page: {id: 3, result: {columns: [...], rows: [[...]], ms: 2}}  or  {id, result: {error}}
//   worker -> page, once started: {ready: true} or {ready: false, error: "..."}
//
// Every message runs to its end before the next one (attnext_web_exec is synchronous): training
// blocks this thread, never the page's.
var attnextExec = createAttnext().then(function (module) {
  var rc = module.ccall('attnext_web_open', 'number', [], []);
  if (rc !== 0) throw new Error('attnext_web_open: SQLite error ' + rc);
  return module.cwrap('attnext_web_exec', 'string', ['string', 'string']);
});
attnextExec.then(function () { scope.postMessage({ready: true}); },
                 function (err) { scope.postMessage({ready: false, error: String(err)}); });
scope.onmessage = function (event) {
  var msg = event.data;
  attnextExec.then(function (exec) {
    var began = Date.now(), result;
    try {
      result = JSON.parse(exec(msg.sql, msg.params == null ? null : JSON.stringify(msg.params)));
    } catch (err) { // an abort of the WebAssembly module (out of memory) lands here
      result = {error: 'attnext: ' + String(err)};
    }
    result.ms = Date.now() - began;
    scope.postMessage({id: msg.id, result: result});
  }, function (err) { scope.postMessage({id: msg.id, result: {error: String(err)}}); });
};
