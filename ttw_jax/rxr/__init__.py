"""Room-across-Room and R2R (Ku et al. 2020; Anderson et al. 2018): Matterport graphs, the 36 views,
records with pose traces, two-level path sampling, the panoramic simulator, the RCM agent and
PL / NE / SR / SPL / nDTW / SDTW."""
