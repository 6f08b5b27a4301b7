from django.apps import AppConfig
from django.core import checks
from django.core.signals import setting_changed


class DeuzConfig(AppConfig):
    name = "deuz_django"
    verbose_name = "Deuz agent runs"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks as deuz_checks
        from . import notifications
        from .conf import deuz_settings, reload_on_setting_changed
        from .registry import forget_agents_on_setting_changed
        from .runs import recovery

        for check in deuz_checks.ALL:
            checks.register(check, "deuz_django")
        for deploy_check in deuz_checks.DEPLOY:
            checks.register(deploy_check, "deuz_django", deploy=True)
        setting_changed.connect(reload_on_setting_changed)
        setting_changed.connect(forget_agents_on_setting_changed)
        notifications.connect_receivers()
        if deuz_settings.RECOVERY_SWEEPER:  # a tasks worker's settings, typically
            recovery.start_sweeper()
