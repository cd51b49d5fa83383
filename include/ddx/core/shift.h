// A softmax's or log-sum-exp's max held constant.
//
// exp(x - m) / Σ exp(x - m) and m + ln Σ exp(x - m) do not change when m
// moves: shifting m by δ scales every exp(x - m) of its group by exp(-δ), and
// the ratio, or the sum with ln, takes the factor back out. The max is there
// for numerical range only; the loss's derivative with respect to it is
// exactly zero, and its reverse rule (the argmax rows, ties shared by a
// window of counts) and every reader's term for it are wasted work
// (attention: the max's backward and its readers' terms, a share of the
// program measured in bench/RESULTS.md, 'Figures from code comments').
//
// HeldMaxima proves it per max or min column: it follows a symbolic shift δ_g
// (one per group g of that column) through every relation downstream and
// holds the column constant only if the loss comes out invariant. The proof
// is conservative: anything it does not understand (a shifted value compared,
// grouped by, or passed to a function other than exp and ln) keeps the
// column's gradient.
#pragma once

#include <set>
#include <utility>
#include <vector>

#include "ddx/core/ir.h"
#include "ddx/core/pure.h"

namespace ddx {

// The (relation, column) pairs among the max/min columns of Aggregate and
// Window relations in `order` (topological, the loss last) whose shift leaves
// `loss` unchanged.
std::set<std::pair<const Rel *, int>> HeldMaxima(const Rel *loss, const std::vector<Rel *> &order);

}  // namespace ddx
