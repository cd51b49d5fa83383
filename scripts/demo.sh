#!/usr/bin/env bash
# The main job, from nothing: installs what is missing, builds ddx, starts a
# throwaway PostgreSQL cluster with ddx and trains a small GPT in SQL on the
# text of the GPL (examples/gpt/train.sql): the training and validation
# losses fall (the validation loss below 2.0 nats per character after
# ~1,600 of its 1,700 steps, ~7 minutes on 2 cores), the model writes
# samples, and both curves are drawn to build/gpt_loss.png (gnuplot).
# DDX_DEMO_STEPS=N trains N steps instead (300: ~2 minutes, a model that
# writes letters and spaces, not yet words).
# The smallest example, a linear model by gradient descent in plpgsql:
#   scripts/pg.sh psql -d postgres -f examples/train_linear.sql
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
scripts/pg.sh start
trap 'scripts/pg.sh stop' EXIT
mkdir -p build
scripts/pg.sh psql -X -q -v ON_ERROR_STOP=1 -v steps="${DDX_DEMO_STEPS:-1700}" -v curve="$PWD/build/gpt_loss.tsv" \
  -v val_curve="$PWD/build/gpt_val_loss.tsv" -d postgres < examples/gpt/train.sql
gnuplot -e "set terminal png size 900,500; set output 'build/gpt_loss.png';
            set title 'GPT in SQL on the GPL: training and validation loss';
            set xlabel 'AdamW step'; set ylabel 'cross-entropy (nats per character)'; set grid;
            plot 'build/gpt_loss.tsv' using 1:2 with lines lc rgb '#b0b0b0' title 'loss of the step''s batch',
                 '' using 1:2 smooth bezier lw 2 lc rgb '#1f77b4' title 'training (smoothed)',
                 'build/gpt_val_loss.tsv' using 1:2 with linespoints lw 2 pt 7 lc rgb '#d62728' title 'validation (held-out text)'"
echo "loss curves: $PWD/build/gpt_loss.png"
