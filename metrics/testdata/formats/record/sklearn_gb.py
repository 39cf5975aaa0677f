# Records scikit-learn's GradientBoostingClassifier(verbose=1) and KMeans(verbose=1) output.
from sklearn.datasets import load_digits
from sklearn.ensemble import GradientBoostingClassifier
from sklearn.cluster import KMeans
X, y = load_digits(return_X_y=True)
GradientBoostingClassifier(n_estimators=5, max_depth=2, subsample=0.8, verbose=1, random_state=0).fit(X[:300], y[:300] % 2)
KMeans(n_clusters=3, n_init=1, max_iter=4, verbose=1, random_state=0).fit(X[:300])
