// app.js -- the page of index.html: rows from a CSV file (or the bundled headlines) into an
// in-memory SQLite database, attn_fit, then attn_predict, attn_probs and attn_heatmap_svg on a text,
// all through SQL sent to attnext-worker.js (a Web Worker: the page stays responsive while it
// trains). ?demo=1 does it all by itself and then sets #done's data-state and the title.
'use strict';

var MODEL = 'web';
var DEMO_TEXT = 'Glenwood Hawks striker Okafor scores twice in cup final';
var $ = function (id) { return document.getElementById(id); };

// ---- the database: a Web Worker made from attnextWorkerMain's own source (a page opened from
// file:// may not start a worker from a file, but may from a blob), else this thread
var engine = (function () {
  var pending = {}, nextId = 1, onReady, readyPromise;
  readyPromise = new Promise(function (resolve, reject) { onReady = {resolve: resolve, reject: reject}; });
  function receive(msg) {
    if ('ready' in msg) {
      if (msg.ready) onReady.resolve(); else onReady.reject(new Error(msg.error));
      return;
    }
    var done = pending[msg.id];
    delete pending[msg.id];
    if (done) done(msg.result);
  }
  var port, where;
  try {
    var source = attnextWorkerMain.toString() + '\nattnextWorkerMain(self);\n';
    var url = URL.createObjectURL(new Blob([source], {type: 'text/javascript'}));
    port = new Worker(url);
    port.onmessage = function (e) { receive(e.data); };
    port.onerror = function (e) { onReady.reject(new Error('the worker failed: ' + e.message)); };
    where = 'a Web Worker';
  } catch (err) {
    // the same code on this thread: training then blocks the page until it ends
    var scope = {postMessage: function (msg) { setTimeout(function () { receive(msg); }, 0); }};
    attnextWorkerMain(scope);
    port = {postMessage: function (msg) { setTimeout(function () { scope.onmessage({data: msg}); }, 0); }};
    where = 'the page\'s thread (no Web Worker: ' + err.message + '; training blocks the page)';
  }
  return {
    where: where,
    ready: readyPromise,
    // sql(text, params) -> Promise of {columns, rows, ms}; rejects with the SQL error
    sql: function (text, params) {
      return readyPromise.then(function () {
        return new Promise(function (resolve, reject) {
          var id = nextId++;
          pending[id] = function (result) {
            if (result.error) reject(new Error(result.error)); else resolve(result);
          };
          port.postMessage({id: id, sql: text, params: params || null});
        });
      });
    }
  };
})();

// ---- CSV (RFC 4180: quoted fields, "" inside quotes, CRLF or LF) to [[text, label], ...]
function parseCsv(text) {
  var rows = [], row = [], field = '', i = 0, quoted = false, n = text.length;
  if (text.charCodeAt(0) === 0xfeff) i = 1; // a byte order mark
  for (; i < n; i++) {
    var c = text[i];
    if (quoted) {
      if (c === '"') {
        if (text[i + 1] === '"') { field += '"'; i++; } else quoted = false;
      } else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') { row.push(field); field = ''; }
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      row.push(field); field = '';
      if (row.length > 1 || row[0] !== '') rows.push(row);
      row = [];
    } else field += c;
  }
  if (field !== '' || row.length) { row.push(field); rows.push(row); }
  return rows;
}

function escapeHtml(s) {
  return String(s).replace(/[&<>"']/g, function (c) {
    return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
  });
}

function showTable(table, result, format) {
  var html = '<tr>' + result.columns.map(function (c) { return '<th>' + escapeHtml(c) + '</th>'; }).join('') + '</tr>';
  result.rows.forEach(function (row) {
    html += '<tr>' + row.map(function (v, i) {
      return '<td>' + escapeHtml(v === null ? '' : format ? format(v, result.columns[i]) : v) + '</td>';
    }).join('') + '</tr>';
  });
  table.innerHTML = html;
}

function fixed(v) { return typeof v === 'number' && !Number.isInteger(v) ? v.toFixed(3) : v; }

function fail(where, err) {
  where.textContent = err.message;
  where.className = 'status error';
  $('done').dataset.state = 'error';
  $('done').textContent = err.message;
  document.title = 'attnext: error';
  throw err;
}

// ---- 1. rows: the table rows(text, label), filled 500 rows per statement (each statement's
// parameters pass through the WebAssembly stack)
function loadRows(csvText, hasHeader, source) {
  var status = $('rows-status');
  var rows = parseCsv(csvText);
  if (hasHeader) rows.shift();
  var bad = rows.findIndex(function (r) { return r.length < 2; });
  if (bad >= 0) return Promise.reject(new Error('line ' + (bad + 1 + (hasHeader ? 1 : 0)) +
    ' of ' + source + ' has ' + rows[bad].length + ' field(s): a text and a label are needed'));
  var pairs = rows.map(function (r) { return [r[0], r[1]]; });
  status.className = 'status';
  status.textContent = 'Loading ' + pairs.length + ' rows...';
  var chain = engine.sql('DROP TABLE IF EXISTS rows; CREATE TABLE rows(text TEXT, label TEXT)');
  for (var at = 0; at < pairs.length; at += 500) {
    (function (chunk) {
      chain = chain.then(function () {
        return engine.sql('INSERT INTO rows SELECT value ->> 0, value ->> 1 FROM json_each(?1)', [JSON.stringify(chunk)]);
      });
    })(pairs.slice(at, at + 500));
  }
  return chain.then(function () {
    return engine.sql('SELECT label, count(*) AS rows FROM rows GROUP BY label ORDER BY label');
  }).then(function (result) {
    showTable($('rows-summary'), result);
    status.textContent = pairs.length + ' rows from ' + source + ', ' + result.rows.length + ' labels.';
    $('train').disabled = pairs.length === 0;
    return pairs.length;
  }).catch(function (err) { fail(status, err); });
}

// ---- 2. training: attn_fit in the worker, then its figures and the per-epoch log
function train(options) {
  var status = $('train-status');
  status.className = 'status';
  status.textContent = 'Training in ' + (engine.where === 'a Web Worker' ? 'a Web Worker' : 'the page') + '...';
  $('train').disabled = true;
  return engine.sql('SELECT attn_fit(?1, \'SELECT text, label FROM rows\', ?2) AS fit',
                    [MODEL, JSON.stringify(options)]).then(function (result) {
    var fit = JSON.parse(result.rows[0][0]);
    showTable($('figures'), {
      columns: ['figure', 'value'],
      rows: [['version', fit.version], ['training rows', fit.train_rows], ['validation rows', fit.val_rows],
             ['epochs run', fit.epochs_run], ['best epoch', fit.best_epoch],
             ['validation accuracy', fit.val_accuracy], ['validation F1 (weighted)', fit.val_f1],
             ['validation loss', fit.val_loss], ['seconds', fit.seconds]]
    }, fixed);
    status.textContent = 'Trained version ' + fit.version + ' in ' + fit.seconds.toFixed(1) + ' s: validation accuracy ' +
      (fit.val_accuracy === null ? 'none (no validation rows)' : fit.val_accuracy.toFixed(3)) + '.';
    $('predict').disabled = false;
    return engine.sql('SELECT epoch, train_loss, val_loss, val_accuracy, val_f1, seconds FROM attn_training_log ' +
                      'WHERE name = ?1 AND version = ?2 ORDER BY epoch', [MODEL, fit.version]);
  }).then(function (log) {
    showTable($('epoch-log'), log, fixed);
    $('train').disabled = false;
  }).catch(function (err) { $('train').disabled = false; fail(status, err); });
}

// ---- 3. prediction, probabilities and the heatmap (an SVG shown as an image: it runs nothing)
function predict(text) {
  return Promise.all([
    engine.sql('SELECT attn_predict(?1, ?2)', [MODEL, text]),
    engine.sql('SELECT label, probability FROM attn_probs(?1, ?2)', [MODEL, text]),
    engine.sql('SELECT attn_heatmap_svg(?1, ?2)', [MODEL, text])
  ]).then(function (results) {
    var label = results[0].rows[0][0], probs = results[1], svg = results[2].rows[0][0];
    $('prediction').innerHTML = 'Predicted: <b id="predicted">' + escapeHtml(label) + '</b> (' +
      (probs.rows[0][1] * 100).toFixed(1) + '%)';
    showTable($('probs'), probs, fixed);
    var img = $('heatmap');
    img.dataset.svg = svg;
    return new Promise(function (resolve) {
      img.onload = img.onerror = resolve;
      img.src = 'data:image/svg+xml;charset=utf-8,' + encodeURIComponent(svg);
    }).then(function () { return label; });
  }).catch(function (err) { fail($('prediction'), err); });
}

function trainingOptions() {
  return {epochs: Number($('epochs').value), hidden: Number($('hidden').value), embed_dim: 32,
          fc_hidden: 32, batch_size: 16, lr: 0.005, validation: 'random', val_fraction: Number($('val').value),
          seed: 1234, progress: false};
}

$('csv').addEventListener('change', function () {
  var file = this.files[0];
  if (!file) return;
  file.text().then(function (text) { return loadRows(text, $('header').checked, file.name); });
});
$('demo').addEventListener('click', function () {
  loadRows(ATTNEXT_DEMO_CSV, true, 'the bundled demo rows (data/headlines.csv)');
});
$('train').addEventListener('click', function () { train(trainingOptions()); });
$('predict').addEventListener('click', function () { predict($('text').value); });
$('text').addEventListener('keydown', function (e) { if (e.key === 'Enter' && !$('predict').disabled) predict(this.value); });

engine.ready.then(function () {
  return engine.sql('SELECT attn_version()');
}).then(function (result) {
  $('engine').textContent = result.rows[0][0] + ' -- SQL runs in ' + engine.where + '.';
  if (new URLSearchParams(location.search).get('demo') !== '1') return;
  // the page by itself, for a look and for tests/test_browser.py: a small model, few epochs
  var began = Date.now();
  $('epochs').value = 5;
  return loadRows(ATTNEXT_DEMO_CSV, true, 'the bundled demo rows (data/headlines.csv)')
    .then(function () { return train(trainingOptions()); })
    .then(function () { return predict(DEMO_TEXT); })
    .then(function (label) {
      $('done').dataset.state = 'done';
      $('done').dataset.worker = engine.where === 'a Web Worker' ? 'yes' : 'no';
      $('done').textContent = 'demo done in ' + (Date.now() - began) + ' ms: predicted ' + label;
      document.title = 'attnext: demo done';
    });
}).catch(function (err) {
  if ($('done').dataset.state !== 'error') fail($('engine'), err);
});
