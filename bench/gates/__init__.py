"""Gates beyond the absolute bounds of ``gates:``: regressions against a baseline run
(``regression``) and the JUnit XML of every gate's result (``junit``)."""
