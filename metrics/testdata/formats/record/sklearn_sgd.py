# Records scikit-learn's SGDRegressor(verbose=1) output.
import warnings
from sklearn.datasets import load_diabetes
from sklearn.linear_model import SGDRegressor
warnings.simplefilter("ignore")
X, y = load_diabetes(return_X_y=True)
SGDRegressor(max_iter=4, tol=None, verbose=1, random_state=0).fit(X, y)
