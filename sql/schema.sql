-- schema.sql -- the attnext model store (ext/CONCURRENCY.md), created on first use.
-- attnext.so carries a copy of this file (ext/attn_schema.h); tests/test_ext_schema.c checks
-- that the two are identical. Columns that the extension reads on every lookup come before
-- the weights BLOB, so a lookup never walks the BLOB's overflow pages.
CREATE TABLE IF NOT EXISTS attn_models(
  name TEXT NOT NULL,             -- model name: attn_predict('news', ...)
  version INTEGER NOT NULL,       -- 1, 2, ... per name; training again adds one
  created_at TEXT NOT NULL,       -- UTC, ISO 8601 with milliseconds
  deployed INTEGER NOT NULL DEFAULT 0, -- 1 for the version of its name that predicts, else 0
  deployed_seq INTEGER NOT NULL DEFAULT 0, -- larger = deployed more recently; the default
                                  -- model of attn_predict(text) is the deployed row with the largest
  config TEXT,                    -- JSON object: every option of attn_train
  labels TEXT,                    -- JSON array: class labels, in class id order
  metrics TEXT,                   -- JSON object: summary of the training run (NULL if imported)
  weights BLOB NOT NULL,          -- safetensors file (ext/SECURITY.md, Weights format)
  PRIMARY KEY(name, version)
);
-- One entry per deployed row: finding the deployed version of a name, or the default model,
-- reads it and not the other versions (a tune stores up to 256 a run).
CREATE INDEX IF NOT EXISTS attn_models_deployed ON attn_models(name, deployed_seq)
  WHERE deployed = 1;
CREATE TABLE IF NOT EXISTS attn_training_log(
  name TEXT NOT NULL,
  version INTEGER NOT NULL,
  epoch INTEGER NOT NULL,
  train_loss REAL,
  val_loss REAL,
  val_accuracy REAL,
  val_f1 REAL,                    -- weighted F1 on the validation split
  lr REAL,                        -- learning rate used during the epoch
  seconds REAL,                   -- wall time of the epoch
  PRIMARY KEY(name, version, epoch)
);
CREATE TABLE IF NOT EXISTS attn_versions(
  name TEXT NOT NULL PRIMARY KEY, -- a model name
  last_version INTEGER NOT NULL   -- the largest version it was ever given: the next save takes
                                  -- one past it, past attn_models and attn_training_log too
);
CREATE TABLE IF NOT EXISTS attn_lineage(
  name TEXT NOT NULL,
  version INTEGER NOT NULL,
  function TEXT,                  -- attn_train, attn_fit, attn_tune or attn_import
  query TEXT,                     -- the training query, as given
  rows INTEGER,                   -- rows it returned
  rows_sha256 TEXT,               -- SHA-256 of those rows in order (ext/CONCURRENCY.md)
  validation_query TEXT,          -- option "validation_query", else NULL
  validation_rows INTEGER,
  validation_sha256 TEXT,
  options TEXT,                   -- JSON object: the options as given (a tune: the trial's)
  from_name TEXT,                 -- a warm start's base model (option "from") and version
  from_version INTEGER,
  attnext TEXT,                   -- the attnext version that trained it
  backend TEXT,                   -- where it trained: cpu (...) or cuda (...)
  started_at TEXT,                -- UTC, ISO 8601 with milliseconds
  ended_at TEXT,
  PRIMARY KEY(name, version)
);
