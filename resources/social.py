"""The Bit.ly and Facebook Graph API clients as Dagster resources.

Credentials come from ``dg.EnvVar`` (see orchestration/social.py), so Dagster shows the variable's name, never its
value; the clients mask them in their own messages and in urllib3's debug log. ``base_url`` points a client at the
real API (default) or at the loopback stand-in (topicmap.demo.standins) in tests and the demo.
"""

from pathlib import Path

import dagster as dg
from pydantic import Field

from topicmap import settings
from topicmap.social import bitly, facebook
from topicmap.social.rawstore import RawResponseStore
from topicmap.store.names import topicmap_home


class BitlyResource(dg.ConfigurableResource):
    """Bit.ly v3 API client (lookup of bitlinks by URL, daily clicks) with a raw-answer store."""

    token: str = Field(
        default="",
        description="Bit.ly access token; pass dg.EnvVar('TOPICMAP_BITLY_TOKEN'), never a literal. Empty: not configured.",
    )
    base_url: str = Field(default=bitly.DEFAULT_BASE_URL, description="API root (the public API by default).")
    raw_store_dir: str = Field(
        default="",
        description="Folder of gzip-compressed raw answers (a mounted bucket works); empty: TOPICMAP_HOME/raw.",
    )
    timeout_seconds: float = 30.0
    max_retries: int = Field(default=6, description="Retries on rate limits, timeouts and 5xx answers.")
    backoff_seconds: float = Field(
        default=1.0, description="First wait when no Retry-After is given; doubles."
    )

    @property
    def configured(self) -> bool:
        return bool(self.token.strip())

    def raw_store(self) -> RawResponseStore:
        return RawResponseStore(Path(self.raw_store_dir) if self.raw_store_dir else topicmap_home() / "raw")

    def client(self) -> bitly.BitlyClient:
        if not self.configured:
            raise dg.Failure(
                f"Bit.ly is not configured: set {settings.BITLY_TOKEN.name} (see docs/social.md)"
            )
        return bitly.BitlyClient(
            self.token,
            base_url=self.base_url,
            raw_store=self.raw_store(),
            timeout=self.timeout_seconds,
            max_retries=self.max_retries,
            backoff_seconds=self.backoff_seconds,
        )


class FacebookResource(dg.ConfigurableResource):
    """Facebook Graph API engagement client (share, comment and reaction counts per URL)."""

    app_id: str = Field(
        default="", description="Facebook app ID; pass dg.EnvVar('TOPICMAP_FACEBOOK_APP_ID')."
    )
    app_secret: str = Field(
        default="", description="Facebook app secret; pass dg.EnvVar('TOPICMAP_FACEBOOK_APP_SECRET')."
    )
    base_url: str = Field(default=facebook.DEFAULT_BASE_URL, description="Graph API root with its version.")
    timeout_seconds: float = 60.0
    max_attempts: int = Field(
        default=22, description="Attempts on rate-limit and temporary errors (Media Cloud: 22)."
    )
    retry_wait_seconds: float = Field(default=60.0, description="Wait between attempts (Media Cloud: 60 s).")

    @property
    def configured(self) -> bool:
        return bool(self.app_id.strip() and self.app_secret.strip())

    def client(self) -> facebook.FacebookClient:
        if not self.configured:
            raise dg.Failure(
                f"Facebook is not configured: set {settings.FACEBOOK_APP_ID.name} and {settings.FACEBOOK_APP_SECRET.name} (see docs/social.md)"
            )
        return facebook.FacebookClient(
            self.app_id,
            self.app_secret,
            base_url=self.base_url,
            timeout=self.timeout_seconds,
            max_attempts=self.max_attempts,
            retry_wait_seconds=self.retry_wait_seconds,
        )
