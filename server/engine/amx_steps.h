/* The one contracted-dimension loop of the engine's AMX kernels: a 2 x 2 block of accumulator
 * tiles over n steps of 32, software-pipelined. Included once per backend, with no include guard,
 * by lmhead_amx_kernels.h (whose includer defines the tile interface described there) and by
 * gemm.c (on the intrinsics); needs AMX_NAME, AMX_TGT, AMX_LOAD and AMX_DP. Engine-internal.
 *
 * Tiles 0: a0.b0, 1: a0.b1, 2: a1.b0, 3: a1.b1 (without a1, only 0 and 1) accumulate; 4-7 hold the
 * operands. Step i reads the A tiles at a0 + i astep and a1 + i astep (rows sa bytes apart) and the
 * B tiles at b0 + i bstep and b1 + i bstep (rows sb bytes apart). Each operand tile is reloaded for
 * the next step as soon as this step's products that read it are issued, so that a load's latency
 * passes under the other products (measured: a tile load and a product that reads it at once take
 * about twice as long as the two apart). Each accumulator adds its steps in order, as a plain loop
 * would: the same bits. */
AMX_TGT static inline void AMX_NAME(amx_steps)(int n, const bf16 *a0, const bf16 *a1, long sa, size_t astep,
                                               const bf16 *b0, const bf16 *b1, long sb, size_t bstep) {
    AMX_LOAD(4, a0, sa);
    AMX_LOAD(6, b0, sb);
    AMX_LOAD(7, b1, sb);
    if (a1) AMX_LOAD(5, a1, sa);
    for (int i = 0; i < n; i++) {
        const int more = i + 1 < n;
        const size_t ao = astep * (size_t)(i + 1), bo = bstep * (size_t)(i + 1);
        AMX_DP(0, 4, 6);
        if (a1) AMX_DP(2, 5, 6);
        if (more) AMX_LOAD(6, b0 + bo, sb);
        AMX_DP(1, 4, 7);
        if (more) AMX_LOAD(4, a0 + ao, sa);
        if (a1) AMX_DP(3, 5, 7);
        if (more) {
            AMX_LOAD(7, b1 + bo, sb);
            if (a1) AMX_LOAD(5, a1 + ao, sa);
        }
    }
}
