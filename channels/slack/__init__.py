"""The Slack channel: slack-bolt adapter (`adapter`), mrkdwn formatting (`format`) and the
prompt hint (`hint`). The package stays light so the hint loads without slack-bolt."""

from channels.slack.hint import PROMPT_HINT

__all__ = ["PROMPT_HINT"]
