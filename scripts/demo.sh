#!/usr/bin/env bash
# The main job, from nothing: installs what is missing, builds ddx, starts a
# throwaway PostgreSQL cluster with ddx and trains a small GPT in SQL on the
# text of the GPL (examples/gpt/train.sql): the loss falls, the model writes
# a sample, and the loss curve is drawn to build/gpt_loss.png (gnuplot).
# The smallest example, a linear model by gradient descent in plpgsql:
#   scripts/pg.sh psql -d postgres -f examples/train_linear.sql
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
scripts/pg.sh start
trap 'scripts/pg.sh stop' EXIT
mkdir -p build
scripts/pg.sh psql -X -q -v ON_ERROR_STOP=1 -v curve="$PWD/build/gpt_loss.tsv" -d postgres -f examples/gpt/train.sql
gnuplot -e "set terminal png size 900,500; set output 'build/gpt_loss.png';
            set title 'GPT in SQL (1 layer, 2 heads, 16 channels) on the GPL: training loss';
            set xlabel 'AdamW step'; set ylabel 'cross-entropy (nats)'; set grid;
            plot 'build/gpt_loss.tsv' using 1:2 with lines title 'loss of the step''s batch',
                 '' using 1:2 smooth bezier lw 2 title 'smoothed'"
echo "loss curve: $PWD/build/gpt_loss.png"
