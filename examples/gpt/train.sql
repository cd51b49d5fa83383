-- The demo: a small GPT trained on the text of the GPL, in SQL.
-- The reference demo's size: 1 layer, 2 heads, 16 channels, context 16,
-- batch 4, vocabulary the GPL's 76 characters; 200 AdamW steps as nanoGPT
-- configures them (decay on matrices and embeddings only, betas 0.9 / 0.99,
-- clipping at 1.0, warmup then cosine decay), about two minutes on 2 cores.
-- psql -v steps=N changes the length. The loss curve goes to
-- :curve (a tab-separated file: step, loss) for scripts/demo.sh to plot.
\set ON_ERROR_STOP 1
\if :{?steps}
\else
  \set steps 200
\endif
\if :{?curve}
\else
  \set curve gpt_loss.tsv
\endif
SET client_min_messages = notice;
CREATE EXTENSION IF NOT EXISTS ddx;
\i examples/gpt/gpt.sql
\i examples/gpt/load_gpl3.sql
SELECT gpt.setup(n_layer => 1, n_head => 2, n_embd => 16, block_size => 16, batch => 4, steps => :steps);
SELECT ddx_run_drop(name) FROM ddx_runs WHERE name = 'gpt demo';
SELECT ddx_schedule_warmup_cosine('gpt_lr', 10, :steps, 1e-2, 1e-3, :steps);
\timing on
CALL ddx_train(gpt.loss_sql(), gpt.params(), :steps, 'gpt_lr', weight_decay => 0.1, no_decay => gpt.no_decay(),
               max_grad_norm => 1.0, beta2 => 0.99, state_name => 'gpt demo', log_every => 20);
\timing off
-- the loss fell: the mean of the first and of the last 20 steps (each step's
-- loss before it, from its own pass: ddx_train_log)
SELECT round(avg(loss) FILTER (WHERE step <= 20)::numeric, 3) AS first_20_steps,
       round(avg(loss) FILTER (WHERE step > :steps - 20)::numeric, 3) AS last_20_steps,
       round(ln((SELECT count(*) FROM gpt.vocab))::numeric, 3) AS uniform_guess
  FROM ddx_train_log WHERE run = 'gpt demo';
-- what it learned to write: greedy, then sampled at temperature 0.8 (seeded)
SELECT gpt.sample('The ', 60) AS greedy;
SELECT setseed(0.5);
SELECT gpt.sample('The ', 60, 0.8) AS sampled;
-- the curve, for a plot (\copy takes no psql variable)
\pset format unaligned
\pset tuples_only on
\pset fieldsep '\t'
\o :curve
SELECT step, loss FROM ddx_train_log WHERE run = 'gpt demo' ORDER BY step;
\o
