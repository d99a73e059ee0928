"""Talk The Walk (de Vries et al. 2018): landmark maps, the grid environment, random walks, MASC,
the exact Bayes upper bound and the full task (Algorithm 1); localization with emergent
(`emergent`) and natural-language (`language`) communication; landmark classification
(`landmarks`, App. F)."""
