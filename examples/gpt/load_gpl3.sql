-- The corpus every Debian machine has: the text of the GPL, version 3.
\set corpus `cat /usr/share/common-licenses/GPL-3`
SELECT gpt.load_text(:'corpus') AS vocabulary, (SELECT count(*) FROM gpt.tokens) AS tokens;
