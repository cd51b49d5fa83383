#!/usr/bin/env bash
# The main job, from nothing: installs what is missing, builds ddx, starts a
# throwaway PostgreSQL cluster with ddx and trains a small GPT in SQL on the
# text of the GPL (examples/gpt/train.sql): the training and validation
# losses fall (the validation loss below 2.0 nats per character from
# ~1,300 of its 1,600 steps, 4-6 minutes on 2 cores, each step's gradient
# in as many parts at once as there are cores: ddx.shards), the model
# writes samples, and both curves are drawn to build/gpt_loss.png
# (gnuplot). DDX_DEMO_STEPS=N trains N steps instead (300: ~1 minute, a
# model that writes letters and spaces, not yet words).
# The smallest example, a linear model by gradient descent in plpgsql:
#   scripts/pg.sh psql -d postgres -f examples/train_linear.sql
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
scripts/pg.sh start
trap 'scripts/pg.sh stop' EXIT
mkdir -p build
# (the batch's 8 sequences in as many parts as there are cores, up to 8, a
# divisor of 8: parts of equal size, whose mean is the whole batch's)
shards=1
while [ $((shards * 2)) -le "$(nproc)" ] && [ $((shards * 2)) -le 8 ]; do shards=$((shards * 2)); done
scripts/pg.sh psql -X -q -v ON_ERROR_STOP=1 -v steps="${DDX_DEMO_STEPS:-1600}" -v shards=$shards \
  -v curve="$PWD/build/gpt_loss.tsv" -v val_curve="$PWD/build/gpt_val_loss.tsv" -d postgres < examples/gpt/train.sql
gnuplot -e "set terminal png size 900,500; set output 'build/gpt_loss.png';
            set title 'GPT in SQL on the GPL: training and validation loss';
            set xlabel 'AdamW step'; set ylabel 'cross-entropy (nats per character)'; set grid;
            plot 'build/gpt_loss.tsv' using 1:2 with lines lc rgb '#b0b0b0' title 'loss of the step''s batch',
                 '' using 1:2 smooth bezier lw 2 lc rgb '#1f77b4' title 'training (smoothed)',
                 'build/gpt_val_loss.tsv' using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' title 'validation (held-out text)'"
echo "loss curves: $PWD/build/gpt_loss.png"
