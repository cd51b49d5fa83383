-- The demo: a small GPT trained on the text of the GPL, in SQL.
-- The model, nanoGPT's, at the size below; AdamW as nanoGPT configures it
-- (decay on matrices and embeddings only, betas 0.9 / 0.99, clipping at
-- 1.0), the learning rate warmed up over 400 steps to 1e-2, then a cosine
-- decay; a tenth of the text, in ten stretches, kept for validation and
-- never trained on. Every :eval_every steps a line with the training and
-- the validation loss; samples before, half-way and after. The size and
-- schedule are the cheapest in SQL time that bench/gpt_sizes.py's sweep
-- found to take the validation loss below 2.0 nats per character (its
-- 1,700 steps' schedule, scaled to the 1,600 steps here: below 2.0 from
-- step ~1,300; bench/RESULTS.md, "The demo"). psql -v steps=N changes the
-- length (the schedule scales with it). Each step's gradient runs in
-- :shards parts at once (ddx.shards, default 2: the batch's sequences split
-- between the backend and a background worker, the mean of their gradients
-- the whole batch's). The curves go to :curve (step, batch loss) and
-- :val_curve (step, validation loss) for scripts/demo.sh.
\set ON_ERROR_STOP 1
\if :{?steps}
\else
  \set steps 1600
\endif
\if :{?shards}
\else
  \set shards 2
\endif
\if :{?eval_every}
\else
  \set eval_every 100
\endif
\if :{?curve}
\else
  \set curve gpt_loss.tsv
\endif
\if :{?val_curve}
\else
  \set val_curve gpt_val_loss.tsv
\endif
-- (loading prints nothing but the corpus's sizes)
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS ddx;
\i examples/gpt/gpt.sql
\i examples/gpt/load_gpl3.sql
SELECT gpt.setup(n_layer => 1, n_head => 2, n_embd => 32, block_size => 16, batch => 8, steps => :steps,
                 val_windows => 64) \g /dev/null
SELECT '1 layer, 2 heads, 32 channels, context 16, batch 8' AS model, gpt.n_params() AS parameters;
SELECT ddx_run_drop(name) FROM ddx_runs WHERE name = 'gpt demo' \g /dev/null
DELETE FROM gpt.val_log WHERE run = 'gpt demo';
-- (the sweep's warmup 400 steps and the cosine's end at 2,000 for 1,700
-- steps, both scaled with :steps: 376 and 1,882 for 1,600)
SELECT ddx_schedule_warmup_cosine('gpt_lr', (400 * :steps) / 1700, (2000 * :steps) / 1700, 1e-2, 2e-4, :steps) \g /dev/null
SET client_min_messages = notice;
SET ddx.shards = :shards;
\timing on
CALL gpt.train(:steps, :eval_every, 'gpt demo', 'gpt_lr');
\timing off
-- the curves, for a plot (\copy takes no psql variable)
\pset format unaligned
\pset tuples_only on
\pset fieldsep '\t'
\o :curve
SELECT step, loss FROM ddx_train_log WHERE run = 'gpt demo' ORDER BY step;
\o :val_curve
SELECT step, loss FROM gpt.val_log WHERE run = 'gpt demo' ORDER BY step;
\o
