/* kit/geometry/conv2d.c — Conv2D and MaxPooling2D window geometry: TensorFlow's 'same' (out = ceil(in / s),
 * the odd pixel of padding after) and 'valid' (out = (in - k) / s + 1). */
#include "khost/kit/geometry.h"
#include "khost/model.h"

kh_status kh_conv2d_geometry(kh_conv2d_dims *d, int64_t B, int64_t H, int64_t W, int64_t C, int64_t KH,
                             int64_t KW, int64_t OC, int64_t SH, int64_t SW, int padding) {
    if (B < 0 || H < 1 || W < 1 || C < 1 || KH < 1 || KW < 1 || OC < 1 || SH < 1 || SW < 1) return KH_ERR_INVALID;
    d->B = B, d->H = H, d->W = W, d->C = C;
    d->KH = KH, d->KW = KW, d->OC = OC, d->SH = SH, d->SW = SW;
    if (padding == KH_PAD_SAME) {
        // TensorFlow: out = ceil(in / s); the odd pixel of padding goes after (bottom/right)
        d->OH = (H + SH - 1) / SH;
        d->OW = (W + SW - 1) / SW;
        int64_t ph = (d->OH - 1) * SH + KH - H, pw = (d->OW - 1) * SW + KW - W;
        ph = ph > 0 ? ph : 0;
        pw = pw > 0 ? pw : 0;
        d->pad_top = ph / 2, d->pad_bottom = ph - ph / 2;
        d->pad_left = pw / 2, d->pad_right = pw - pw / 2;
    } else if (padding == KH_PAD_VALID) {
        if (KH > H || KW > W) return KH_ERR_INVALID;
        d->OH = (H - KH) / SH + 1;
        d->OW = (W - KW) / SW + 1;
        d->pad_top = d->pad_left = d->pad_bottom = d->pad_right = 0;
    } else {
        return KH_ERR_INVALID;
    }
    return KH_OK;
}
