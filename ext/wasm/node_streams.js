// node_streams.js -- appended to every program of make PLATFORM=wasm (emcc --post-js): the
// standard streams are terminals only when they are. Emscripten 3.1.6's NODERAWFS marks fds 0, 1
// and 2 as terminals whatever they are, so isatty() said yes with output going to a pipe or a
// file: training drew its progress bar into the test's output, and the shell took piped input
// as typed. The streams are made when the runtime starts, after this code has run (the
// WebAssembly module is compiled asynchronously first); each is then asked of Node.
if (typeof ENVIRONMENT_IS_NODE !== 'undefined' && ENVIRONMENT_IS_NODE &&
    typeof FS !== 'undefined' && FS.createStandardStreams) {
  var attnextRawStreams = FS.createStandardStreams;
  FS.createStandardStreams = function() {
    attnextRawStreams.apply(this, arguments);
    var tty = require('tty');
    for (var fd = 0; fd < 3; fd++) {
      if (FS.streams[fd]) FS.streams[fd].tty = tty.isatty(fd);
    }
  };
}
