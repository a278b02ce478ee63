/* AdamW with PyTorch's semantics (torch.optim.AdamW, foreach=False), applied tensor by tensor:
 *   p *= 1 - lr*weight_decay                     (decoupled decay, before the Adam step)
 *   m = m + (1 - beta1) (g - m);  v = beta2 v + (1 - beta2) g^2
 *   p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 * t is the 1-based step number. Defaults: lr 3e-4, betas (0.9, 0.999), eps 1e-8, weight decay 0.01. */
#ifndef ENGINE_ADAMW_H
#define ENGINE_ADAMW_H

#include <stddef.h>

#include "real.h"

typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
} adamw_config;

void adamw_config_defaults(adamw_config *c);

/* Updates n parameters p with gradients g (each multiplied by grad_scale first, for clipping)
 * and state m, v, at step t with learning rate lr; decay selects whether weight decay applies. */
void adamw_update(real *p, const real *g, real *m, real *v, size_t n, const adamw_config *c, double lr, long t,
                  int decay, real grad_scale);

#endif
