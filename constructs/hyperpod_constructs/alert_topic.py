"""The SNS topic the workspace's alert manager publishes to, encrypted, with the policies AMP needs.

Amazon Managed Service for Prometheus notifies only through an SNS receiver (AMP user guide, "Setting up your
alert receiver"); it publishes as the service principal ``aps.amazonaws.com``, so:

* the topic's access policy lets ``aps.amazonaws.com`` ``sns:Publish`` and ``sns:GetTopicAttributes``, only for
  this account and this workspace (``aws:SourceAccount``, ``aws:SourceArn``: AMP user guide, "Giving Amazon
  Managed Service for Prometheus permission to send alert messages to your Amazon SNS topic");
* the topic is encrypted with a customer managed key, because the AWS managed ``alias/aws/sns`` key's policy
  cannot admit a service principal; the key policy lets ``aps.amazonaws.com`` (and ``cloudwatch.amazonaws.com``
  for the heartbeat alarm) ``kms:GenerateDataKey*`` and ``kms:Decrypt`` (SNS developer guide, "Configuring
  AWS KMS permissions" for event sources from AWS services);
* an alarm on the topic's own ``NumberOfMessagesPublished`` notices a silent path: the always-firing
  heartbeat alert reaches the topic once a day, so two whole days without any message mean rules, alert
  manager or policies broke. The alarm publishes to a **separate small topic** (same key, the same e-mail
  addresses subscribed) through CloudWatch: published to the watched topic, its own message would count as
  traffic, reset the alarm and make it flap every 2-3 days while the path stays broken;
* the e-mail subscriptions of the alert topic drop the daily heartbeat with a filter policy on the
  ``alert_kind`` message attribute (``{"alert_kind": [{"anything-but": ["heartbeat"]}, {"exists": false}]}``):
  values of one key are ORed, ``anything-but`` matches only a present attribute and ``"exists": false`` an absent
  one, and the scope is the message attributes by default (SNS developer guide, "String value matching", "Key
  matching", "AND/OR logic", "Subscription filter policy scope"). A pager's dead man's switch subscribes without
  a filter and gets the heartbeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import Aws, Duration, RemovalPolicy
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cloudwatch_actions
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from constructs import Construct

APS_PRINCIPAL = "aps.amazonaws.com"
CLOUDWATCH_PRINCIPAL = "cloudwatch.amazonaws.com"
#: Heartbeat alarm: one-day periods, alarm when two in a row saw no message (the heartbeat repeats daily).
SILENCE_PERIOD = Duration.days(1)
SILENT_PERIODS = 2
#: The message attribute the alert manager sets (``hyperpod_core.telemetry.alertmanager.ATTRIBUTES``) and the
#: value of the heartbeat; repeated here because constructs import nothing of ours.
KIND_ATTRIBUTE = "alert_kind"
HEARTBEAT_KIND = "heartbeat"
#: Conditions on ``alert_kind`` of the e-mail subscriptions (ORed): everything but the heartbeat, and messages
#: without the attribute.
EMAIL_FILTER_CONDITIONS = ({"anything-but": [HEARTBEAT_KIND]}, {"exists": False})


@dataclass(frozen=True, kw_only=True)
class AlertTopicProps:
    """Props of :class:`AlertTopic`."""

    workspace_arn: str
    """The AMP workspace whose alert manager publishes to the topic (the only one the policy admits)."""
    display_name: str
    """Shown as the sender of e-mail notifications (at most 100 characters)."""
    email_addresses: Sequence[str] = ()
    """Subscribed with protocol ``email``; each confirms from the e-mail SNS sends. Default: none."""


class AlertTopic(Construct):
    """Key, alert topic, access policy, filtered e-mail subscriptions, and the silence alarm with its own topic."""

    key: kms.Key
    topic: sns.Topic
    topic_arn: str
    subscriptions: list[sns.Subscription]
    """E-mail subscriptions of the alert topic (heartbeat filtered out)."""
    silence_topic: sns.Topic
    """Where the silence alarm publishes: never the topic it watches."""
    silence_subscriptions: list[sns.Subscription]
    silence_alarm: cloudwatch.Alarm

    def __init__(self, scope: Construct, construct_id: str, *, props: AlertTopicProps) -> None:
        super().__init__(scope, construct_id)
        if not 1 <= len(props.display_name) <= 100:
            raise ValueError(f"display_name must be 1-100 characters, got {props.display_name!r}")
        bad = [a for a in props.email_addresses if a.count("@") != 1]
        if bad:
            raise ValueError(f"email_addresses must be e-mail addresses, got {bad[0]!r}")
        if len(set(props.email_addresses)) != len(props.email_addresses):
            raise ValueError("email_addresses must not repeat an address")

        self.key = kms.Key(
            self, "Key", description=f"{props.display_name}: alert topic (SNS server-side encryption)",
            enable_key_rotation=True, removal_policy=RemovalPolicy.DESTROY, pending_window=Duration.days(7))
        for sid, principal in (("AmpAlertManager", APS_PRINCIPAL), ("CloudWatchAlarms", CLOUDWATCH_PRINCIPAL)):
            self.key.add_to_resource_policy(iam.PolicyStatement(
                sid=sid, principals=[iam.ServicePrincipal(principal)],
                actions=["kms:GenerateDataKey*", "kms:Decrypt"], resources=["*"]))
        self.topic = sns.Topic(self, "Topic", display_name=props.display_name, master_key=self.key,
                               enforce_ssl=True)
        self.topic_arn = self.topic.topic_arn
        self.topic.add_to_resource_policy(iam.PolicyStatement(
            sid="AmpAlertManagerPublish", principals=[iam.ServicePrincipal(APS_PRINCIPAL)],
            actions=["sns:Publish", "sns:GetTopicAttributes"], resources=[self.topic.topic_arn],
            conditions={"ArnEquals": {"aws:SourceArn": props.workspace_arn},
                        "StringEquals": {"AWS:SourceAccount": Aws.ACCOUNT_ID}}))
        self.subscriptions = [
            sns.Subscription(self, f"Email{i}", topic=self.topic, protocol=sns.SubscriptionProtocol.EMAIL,
                             endpoint=address, filter_policy={
                                 KIND_ATTRIBUTE: sns.SubscriptionFilter(conditions=list(EMAIL_FILTER_CONDITIONS))})
            for i, address in enumerate(props.email_addresses)]

        published = self.topic.metric_number_of_messages_published(period=SILENCE_PERIOD, statistic="Sum")
        self.silence_alarm = cloudwatch.Alarm(
            self, "SilenceAlarm", metric=published, threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=SILENT_PERIODS, datapoints_to_alarm=SILENT_PERIODS,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
            alarm_description=(f"{props.display_name}: no message on the alert topic for {SILENT_PERIODS} days; the "
                               "daily heartbeat alert stopped arriving, so no alert would either. Check the AMP "
                               "workspace's alert manager and the topic's access and key policies."))
        self.silence_topic = sns.Topic(self, "SilenceTopic", display_name=props.display_name, master_key=self.key,
                                       enforce_ssl=True)
        self.silence_topic.add_to_resource_policy(iam.PolicyStatement(
            sid="CloudWatchAlarmPublish", principals=[iam.ServicePrincipal(CLOUDWATCH_PRINCIPAL)],
            actions=["sns:Publish"], resources=[self.silence_topic.topic_arn],
            conditions={"ArnEquals": {"aws:SourceArn": self.silence_alarm.alarm_arn},
                        "StringEquals": {"AWS:SourceAccount": Aws.ACCOUNT_ID}}))
        self.silence_subscriptions = [
            sns.Subscription(self, f"SilenceEmail{i}", topic=self.silence_topic,
                             protocol=sns.SubscriptionProtocol.EMAIL, endpoint=address)
            for i, address in enumerate(props.email_addresses)]
        # Both transitions: "the path went silent" and "the heartbeat is back".
        self.silence_alarm.add_alarm_action(cloudwatch_actions.SnsAction(self.silence_topic))
        self.silence_alarm.add_ok_action(cloudwatch_actions.SnsAction(self.silence_topic))
