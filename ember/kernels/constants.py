"""Numeric constants of ember's ops, in one place: the eager kernels, the pointwise-engine
vocabulary, the derivative formulas of the op spec (UPPERCASE names there) and the ONNX
symbolics read them from here."""
import math

# selu(x) = SELU_SCALE * (x if x > 0 else SELU_ALPHA * (exp(x) - 1))  (Klambauer et al. 2017)
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
# gelu(x, approximate='tanh') = x/2 * (1 + tanh(GELU_TANH_BETA * (x + GELU_TANH_KAPPA * x**3)))
GELU_TANH_BETA = math.sqrt(2.0 / math.pi)
GELU_TANH_KAPPA = 0.044715
SQRT1_2 = 1.0 / math.sqrt(2.0)
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
LN2 = 0.6931471805599453
LN10 = 2.302585092994046
TWO_OVER_SQRT_PI = 1.1283791670955126
# special functions (ember.special and the pointwise math around it)
PI = math.pi
SQRT_PI_2 = math.sqrt(math.pi) / 2.0
SQRT_2PI = math.sqrt(2.0 * math.pi)
LOG2E = 1.0 / math.log(2.0)
DEG2RAD = math.pi / 180.0
RAD2DEG = 180.0 / math.pi
NAN = math.nan
# binary_cross_entropy's gradient (x - t) / max(x (1 - x), BCE_EPSILON): torch's EPSILON
BCE_EPSILON = 1e-12
NEG_INF = -math.inf
