# Records XGBoost's xgb.train evaluation lines.
import numpy as np
import xgboost as xgb
rng = np.random.default_rng(0)
X = rng.normal(size=(400, 5)); y = (X[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int)
dtrain = xgb.DMatrix(X[:300], label=y[:300]); deval = xgb.DMatrix(X[300:], label=y[300:])
xgb.train({"objective": "binary:logistic", "eval_metric": ["logloss", "error"], "max_depth": 2}, dtrain, num_boost_round=5, evals=[(dtrain, "train"), (deval, "eval")])
