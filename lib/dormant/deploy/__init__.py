"""A user's own project and its deployment: `dormant new` scaffolds one (`scaffold`), `dormant package` writes
the SAM template, the Terraform module, the functions' bundle and the dependency layer for it (`package`).

The deployment files ship in this package (`files/`): Dormant's own template.yaml, infra/*.tf and functions/ are
these very files (tests/unit/test_deploy_files.py); `render` only substitutes the app and the code paths.
"""
