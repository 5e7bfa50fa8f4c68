/* attn_schema.h -- a copy of sql/schema.sql compiled into attnext.so (the model store tables,
 * created on first use). Keep identical to sql/schema.sql: tests/test_ext_schema.c compares. */
#ifndef ATTNEXT_ATTN_SCHEMA_H
#define ATTNEXT_ATTN_SCHEMA_H
static const char attn_schema_sql[] =
    "-- schema.sql -- the attnext model store (README.md, The model store), created on first use.\n"
    "-- attnext.so carries a copy of this file (ext/attn_schema.h); tests/test_ext_schema.c checks\n"
    "-- that the two are identical. Columns that the extension reads on every lookup come before\n"
    "-- the weights BLOB, so a lookup never walks the BLOB's overflow pages.\n"
    "CREATE TABLE IF NOT EXISTS attn_models(\n"
    "  name TEXT NOT NULL,             -- model name: attn_predict('news', ...)\n"
    "  version INTEGER NOT NULL,       -- 1, 2, ... per name; training again adds one\n"
    "  created_at TEXT NOT NULL,       -- UTC, ISO 8601 with milliseconds\n"
    "  deployed INTEGER NOT NULL DEFAULT 0, -- 1 for the version of its name that predicts, else 0\n"
    "  deployed_seq INTEGER NOT NULL DEFAULT 0, -- larger = deployed more recently; the default\n"
    "                                  -- model of attn_predict(text) is the deployed row with the largest\n"
    "  config TEXT,                    -- JSON object: every option of attn_train\n"
    "  labels TEXT,                    -- JSON array: class labels, in class id order\n"
    "  metrics TEXT,                   -- JSON object: summary of the training run (NULL if imported)\n"
    "  weights BLOB NOT NULL,          -- safetensors file (README.md, Weights format)\n"
    "  PRIMARY KEY(name, version)\n"
    ");\n"
    "-- One entry per deployed row: finding the deployed version of a name, or the default model,\n"
    "-- reads it and not the other versions (a tune stores up to 256 a run).\n"
    "CREATE INDEX IF NOT EXISTS attn_models_deployed ON attn_models(name, deployed_seq)\n"
    "  WHERE deployed = 1;\n"
    "CREATE TABLE IF NOT EXISTS attn_training_log(\n"
    "  name TEXT NOT NULL,\n"
    "  version INTEGER NOT NULL,\n"
    "  epoch INTEGER NOT NULL,\n"
    "  train_loss REAL,\n"
    "  val_loss REAL,\n"
    "  val_accuracy REAL,\n"
    "  val_f1 REAL,                    -- weighted F1 on the validation split\n"
    "  lr REAL,                        -- learning rate used during the epoch\n"
    "  seconds REAL,                   -- wall time of the epoch\n"
    "  PRIMARY KEY(name, version, epoch)\n"
    ");\n";
#endif
