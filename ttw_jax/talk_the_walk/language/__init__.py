"""Localization in natural language: dialogues, the NL tourist and guide, their losses and
evaluation."""
