# Records scikit-learn's MLPClassifier(verbose=True) output.
import warnings
from sklearn.datasets import load_digits
from sklearn.neural_network import MLPClassifier
warnings.simplefilter("ignore")
X, y = load_digits(return_X_y=True)
MLPClassifier(hidden_layer_sizes=(16,), max_iter=6, verbose=True, random_state=0).fit(X[:400] / 16, y[:400])
MLPClassifier(hidden_layer_sizes=(16,), max_iter=4, verbose=True, early_stopping=True, random_state=0).fit(X[:400] / 16, y[:400])
