-- AdamW with global-norm clipping and nanoGPT's warmup+cosine schedule on a
-- 2-layer MLP over four parameter tables, against fixtures computed by
-- PyTorch (torch.optim.AdamW + clip_grad_norm_, float64) and committed in
-- test/fixtures/adamw_mlp.sql: weights and both moments after each of 10 steps.
CREATE EXTENSION IF NOT EXISTS ddx;
CREATE SCHEMA optim_fixture;
SET search_path = optim_fixture, public;
\set VERBOSITY terse
SET client_min_messages = warning;
-- (pg_regress's input folder is test/regress, wherever the build runs)
\getenv regress PG_ABS_SRCDIR
\set fixture :regress '/../fixtures/adamw_mlp.sql'
\i :fixture
ALTER TABLE w1 ADD PRIMARY KEY (i, j);
ALTER TABLE w2 ADD PRIMARY KEY (i, j);
ALTER TABLE b1 ADD PRIMARY KEY (j);
ALTER TABLE b2 ADD PRIMARY KEY (j);
SELECT ddx_schedule_warmup_cosine('sched', 3, 8, 0.05, 0.005, 12);
CREATE TABLE worst (step int, err float8);
DO $$
DECLARE
  loss text := $l$
    WITH hp AS (SELECT x.i AS s, w1.j, sum(x.val * w1.val) AS z FROM x JOIN w1 ON x.j = w1.i GROUP BY x.i, w1.j),
         h AS (SELECT hp.s, hp.j, tanh(hp.z + b1.val) AS a FROM hp JOIN b1 ON b1.j = hp.j),
         op AS (SELECT h.s, w2.j AS c, sum(h.a * w2.val) AS z FROM h JOIN w2 ON h.j = w2.i GROUP BY h.s, w2.j),
         logits AS (SELECT op.s, op.c, op.z + b2.val AS z FROM op JOIN b2 ON b2.j = op.c),
         m AS (SELECT s, max(z) AS m FROM logits GROUP BY s),
         se AS (SELECT l.s, sum(exp(l.z - m.m)) AS se FROM logits l JOIN m ON m.s = l.s GROUP BY l.s),
         ce AS (SELECT l.s, m.m + ln(se.se) - l.z AS ce FROM logits l JOIN m ON m.s = l.s JOIN se ON se.s = l.s
                JOIN lab ON lab.j = l.s AND lab.val = l.c)
    SELECT avg(ce) FROM ce$l$;
  e float8;
BEGIN
  FOR it IN 0 .. 9 LOOP
    PERFORM ddx_adamw_step(loss, ARRAY['w1.val', 'b1.val', 'w2.val', 'b2.val'],
                           (SELECT lr FROM sched WHERE step = it), beta1 => 0.9, beta2 => 0.95, eps => 1e-8,
                           weight_decay => 0.1, no_decay => ARRAY['b1.val', 'b2.val'], max_grad_norm => 0.05,
                           state_name => 'fixture');
    SELECT max(greatest(abs(got.val - x.val), abs(got.m - x.m), abs(got.v - x.v))
               / greatest(1, abs(x.val), abs(x.m), abs(x.v))) INTO e
      FROM expected x JOIN (
        SELECT 'w1' AS tbl, p.i, p.j, p.val, s.m, s.v FROM w1 p
          JOIN ddx_state('fixture', 'w1.val') s ON (s.key ->> 'i')::int = p.i AND (s.key ->> 'j')::int = p.j
        UNION ALL SELECT 'w2', p.i, p.j, p.val, s.m, s.v FROM w2 p
          JOIN ddx_state('fixture', 'w2.val') s ON (s.key ->> 'i')::int = p.i AND (s.key ->> 'j')::int = p.j
        UNION ALL SELECT 'b1', 0, p.j, p.val, s.m, s.v FROM b1 p JOIN ddx_state('fixture', 'b1.val') s ON (s.key ->> 'j')::int = p.j
        UNION ALL SELECT 'b2', 0, p.j, p.val, s.m, s.v FROM b2 p JOIN ddx_state('fixture', 'b2.val') s ON (s.key ->> 'j')::int = p.j) got
        ON got.tbl = x.tbl AND got.i = x.i AND got.j = x.j
     WHERE x.step = it + 1;
    INSERT INTO worst VALUES (it + 1, e);
  END LOOP;
END $$;
SELECT step, err < 1e-10 AS matches_pytorch FROM worst ORDER BY step;
-- every row of w1 (6 × 8) has its state
SELECT count(*) AS rows_compared FROM ddx_state('fixture', 'w1.val');
SELECT count(*) AS values_compared FROM expected;
