-- The corpus every Debian machine has: the text of the GPL, version 3; a
-- tenth of it, spread over it (gpt.load_text), kept for validation.
\set corpus `cat /usr/share/common-licenses/GPL-3`
SELECT gpt.load_text(:'corpus', val_share => 0.1) AS vocabulary;
SELECT n AS characters, n_train AS for_training, n - n_train AS for_validation FROM gpt.corpus;
